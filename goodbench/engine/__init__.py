"""The reference chunked-prefill engine: vLLM v1's scheduler over a GPU/model cost model."""
