"""Vision-language model adapters: one module per backend (hf, openai, vllm) plus the response cache."""
