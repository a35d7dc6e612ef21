"""Daily summaries and the go-live verdict: pure builders (build), rendering (render), and the
I/O shell that reads the store and writes the files (inputs, publish)."""
