"""Jobs and leases: the single home of the job store's rules.

The CLI, the library door (proctor.api), and later the MCP tools and the server all call
these functions; none of them re-states a rule. Modules: model (records, ids, the JSON
Schema), paths (write-path claims and overlap), rows (the job table), lease (who is
calling), fork (declaring and releasing), reap (jobs proctor ends itself), listing
(`ls jobs`), describe (a holder's terms), take (exec and exit).
"""
