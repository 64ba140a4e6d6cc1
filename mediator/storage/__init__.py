"""How a process reaches Redis: the URL and its deployment mode (`target`), the clients for
each mode (`clients`), and what a sender's answer waits for (`durability`)."""
