"""One recv() is not one request: TCP delivers a byte stream, not messages.

The article's servers call conn.recv(1024) once and treat the result as the
request. This shows why that breaks: a client may send its request in pieces,
and a single recv returns whatever has arrived so far.
"""

import socket
import threading
import time

REQUEST = b"GET / HTTP/1.1\r\nHost: example\r\n\r\n"

server, client = socket.socketpair()


def send_in_two_pieces() -> None:
    client.sendall(REQUEST[:10])  # "GET / HTTP"
    time.sleep(0.05)  # a slow network, a slow client, or just a large request
    client.sendall(REQUEST[10:])


writer = threading.Thread(target=send_in_two_pieces)
writer.start()

first = server.recv(1024)  # the naive server stops here
print(f"one recv(1024) returned {len(first)} of {len(REQUEST)} bytes: {first!r}")
assert first == REQUEST[:10]

received = first
while b"\r\n\r\n" not in received:  # the correct server reads until the blank line
    received += server.recv(1024)
writer.join()
print(f"reading until the blank line returned all {len(received)} bytes")
assert received == REQUEST
server.close()
client.close()
