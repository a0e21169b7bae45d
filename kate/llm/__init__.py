"""Model clients behind one protocol (kate.llm.base.ChatModel) and the offline model registry."""
