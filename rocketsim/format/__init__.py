"""What a message is on the wire: the message model, its byte formats, compression and the
client's validators.
"""
