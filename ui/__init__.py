"""The annotation studio (Gradio). It calls `relabel` services only; it never talks to the database itself."""
