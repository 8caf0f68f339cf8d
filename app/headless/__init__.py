"""``sdschat join --headless``: a node driven by stdin, reporting JSON lines on stdout
(:mod:`app.headless.run`), with backpressure on typed lines (:mod:`app.headless.line_feed`);
its side of the command table (:mod:`app.headless.front`).
"""
