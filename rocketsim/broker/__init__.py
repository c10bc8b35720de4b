"""The broker model: the open latency model, the closed-loop send queue, what a broker stores, and
the broker-side tables (transactions, consumer allocation).
"""
