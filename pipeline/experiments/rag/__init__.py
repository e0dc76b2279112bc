"""The RAG answer judge (seed 002): rag_judge -> rag_aggregate; design.py lists its stages."""
