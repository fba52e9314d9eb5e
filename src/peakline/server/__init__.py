"""The validation server (`peakline serve`, docs/server.md): every profile a CI pipeline or an
engineer pushes is stored with its verdict, and a deployment pipeline asks for the verdict.

    schema.py     the tables (SQLAlchemy Core) and what each column holds
    migrations/   Alembic revisions that create and evolve them
    database.py   engine for SQLite (WAL, the default) or PostgreSQL, migrations at start-up
    summary.py    what a run's columns hold: figures from the profile, a small memory timeline
    store.py      models, runs, budgets and tokens: every query the server makes
    judging.py    a pushed run judged against its model's budgets and previous passing version
    planner.py    which models fit on one machine together (worst case and timeline estimate)
    app.py        the HTTP API (Starlette) and its limits: auth, upload size, validation
    ui.py         the web pages (server-rendered, no script, no CDN) and their SVG charts

Needs the ``server`` extra (``pip install 'peakline[server]'``); `peakline push` does not.
"""
