"""Exit rules and the engine that applies them: simulated over stored logits, or live."""
