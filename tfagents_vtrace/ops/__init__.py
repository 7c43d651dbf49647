"""Pure tensor ops: V-trace, DI-engine V-trace losses, returns/GAE, Retrace, TAAC."""
