"""Answer quality (seed 004): a RAG answer generator, and a small structured evaluator that scores
an answer and says what is wrong with it and how to improve it."""
