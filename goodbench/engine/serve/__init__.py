"""The engine on the real clock: `goodbench serve`, an OpenAI-compatible streaming server whose steps
end on the cost model's deadlines (steploop.py), for one instance (server.py) or several (cluster.py)."""
