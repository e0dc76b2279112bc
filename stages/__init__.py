"""One short module per DVC stage; each `main()` reads its own params.yaml section."""
