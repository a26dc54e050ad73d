"""What the stages use but is no stage of its own: keyword phrases, query expansion, boosts, fact
choice, the question's frame and the LLM prompt (the stages are ``router.stages``, ADR 0006)."""
