"""What the producer does: client versions, routes, the latency-fault strategy, the send loops and
the outcome vocabulary.
"""
