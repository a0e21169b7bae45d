"""kate for agent loops you already have: ``kate serve`` (an OpenAI-compatible server, ``kate.serve.app``)
and ``wrap(openai_client)`` (the same in process). Both are thin shells around kate's ``Policy``:
one ``ChatService`` answers a chat-completions request with the request's knowledge and vote."""

from kate.serve.wrap import KateClient, wrap

__all__ = ["KateClient", "wrap"]
