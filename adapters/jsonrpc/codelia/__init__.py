"""jsonrpc/codelia."""
