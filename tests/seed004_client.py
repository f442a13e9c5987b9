# Seed 004's example Python client, copied from the seed as written, socket path included:
# the tests set HOME so that ~/.local/share/ralph/sockets/<task>.sock is the control
# socket. Two additions: `import os`, which the seed's code uses but does not import, and
# the `__main__` lines at the end, to run it: python tests/seed004_client.py TASK_NAME
# (it prints each message it reads until the server closes the connection).
import asyncio
import json
import os  # the seed's example calls os.path.expanduser without importing os

async def connect_to_ralph(task_name: str):
    socket_path = f"~/.local/share/ralph/sockets/{task_name}.sock"
    reader, writer = await asyncio.open_unix_connection(
        os.path.expanduser(socket_path)
    )

    # Subscribe to all events
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "subscribe",
        "params": {"events": ["*"]}
    }
    writer.write((json.dumps(request) + "\n").encode())
    await writer.drain()

    # Read responses and events
    while True:
        line = await reader.readline()
        if not line:
            break
        msg = json.loads(line.decode())
        print(msg)


if __name__ == "__main__":
    import sys

    asyncio.run(connect_to_ralph(sys.argv[1]))
