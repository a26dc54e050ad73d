"""Text analysis shared by build and serve: normalisation, tokens, stopwords, stems."""
