"""The bundled engine: Qwen3 target + DFlash drafter, greedy, batch one, and its server."""
