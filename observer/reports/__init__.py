"""Daily summaries and the go-live verdict: pure builders (compute), rendering (render), and the
I/O shell that reads the store and writes the files (inputs, publish)."""
