"""jsonrpc/session_socket."""
