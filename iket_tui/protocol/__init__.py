"""Sans-I/O wire protocol: framing, messages, handshake and the recording format."""
