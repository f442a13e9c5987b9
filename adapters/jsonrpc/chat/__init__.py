"""jsonrpc/chat."""
