"""How a process reaches Redis: the URL and its deployment mode (`target`), and the clients
for each mode (`clients`). What a send waits for (WAIT, WAITAOF) is the engine's
(`mediator.engine.durability`)."""
