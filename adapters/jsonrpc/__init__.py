"""jsonrpc."""
