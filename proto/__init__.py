"""The CRI v1 subset the agent reads and writes, and its generated code."""
