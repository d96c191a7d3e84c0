"""The bundled engine: a Qwen3, Llama or Qwen2 target + DFlash drafter, greedy, batch one, and its
server."""
