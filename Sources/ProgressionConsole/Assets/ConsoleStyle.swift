#if Console
/// The console's stylesheet (`/assets/console.css`).
enum ConsoleStyle {
    static let source = #"""
:root { --fg: #1d2430; --muted: #5e6878; --line: #d9dee6; --bg: #f6f7f9; --panel: #fff; --accent: #2457c5;
  --running: #1479b8; --paused: #b7791f; --completed: #2f855a; --failed: #c53030; --cancelled: #718096; --pending: #4a5568; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; align-items: center; gap: 1.5rem; padding: .6rem 1.2rem; background: #1d2430; color: #fff; }
header a { color: #fff; text-decoration: none; }
header nav { display: flex; gap: 1rem; flex: 1; }
header .brand { font-weight: 700; letter-spacing: .02em; }
header .access { margin: 0; font-size: 12px; }
header .read-only { background: #4a5568; padding: .15rem .5rem; border-radius: 3px; }
header button { font-size: 12px; }
main { padding: 1rem 1.2rem 2rem; max-width: 1400px; }
footer { padding: .4rem 1.2rem; color: var(--muted); font-size: 12px; }
h1 { font-size: 1.45rem; margin: .2rem 0 .8rem; word-break: break-word; }
h1 .id { font-size: .9rem; color: var(--muted); font-weight: 400; font-family: ui-monospace, monospace; }
h2 { font-size: 1.05rem; margin: 1.4rem 0 .5rem; }
.small { font-size: .8rem; font-weight: 400; color: var(--muted); }
a { color: var(--accent); }
table { border-collapse: collapse; width: 100%; background: var(--panel); border: 1px solid var(--line); }
th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid var(--line); vertical-align: middle; }
th { font-weight: 600; font-size: 12px; color: var(--muted); background: #fafbfc; }
td.id, .id { font-family: ui-monospace, monospace; font-size: 12px; }
td.name { word-break: break-word; }
td.number, .number { font-variant-numeric: tabular-nums; }
td.time { white-space: nowrap; color: var(--muted); font-size: 12px; }
td.bar { white-space: nowrap; min-width: 11rem; }
progress { width: 8rem; height: .8rem; vertical-align: middle; accent-color: var(--running); }
progress:indeterminate { opacity: .35; }
.percent { display: inline-block; width: 3rem; text-align: right; font-variant-numeric: tabular-nums; font-size: 12px; }
.status { display: inline-block; padding: .05rem .45rem; border-radius: 3px; font-size: 12px; color: #fff; background: var(--pending); }
.status.running { background: var(--running); } .status.paused { background: var(--paused); }
.status.completed { background: var(--completed); } .status.failed { background: var(--failed); }
.status.cancelled { background: var(--cancelled); } .status.stalled { background: var(--failed); }
.failed-steps { font-size: 12px; color: var(--failed); white-space: nowrap; }
.counts { display: flex; flex-wrap: wrap; gap: .6rem; margin-bottom: 1rem; }
.count { display: flex; flex-direction: column; min-width: 7rem; padding: .5rem .8rem; background: var(--panel);
  border: 1px solid var(--line); border-left: 4px solid var(--pending); border-radius: 3px; text-decoration: none; color: var(--fg); }
.count .number { font-size: 1.4rem; font-weight: 600; } .count .label { font-size: 12px; color: var(--muted); }
.count.running { border-left-color: var(--running); } .count.paused { border-left-color: var(--paused); }
.count.completed { border-left-color: var(--completed); } .count.failed { border-left-color: var(--failed); }
.count.cancelled { border-left-color: var(--cancelled); } .count.total { border-left-color: var(--fg); }
.panels { display: flex; flex-wrap: wrap; gap: 1rem; }
.panel { flex: 1 1 28rem; background: var(--panel); border: 1px solid var(--line); border-radius: 3px; padding: .6rem .9rem; }
.panel h2 { margin-top: .3rem; }
.panel table { border: none; }
.facts { color: var(--muted); font-size: 12px; }
table.facts th { width: 9rem; background: none; }
.chart { width: 100%; height: 120px; background: #fafbfc; }
.chart rect.completed, .key.completed { fill: var(--completed); background: var(--completed); }
.chart rect.failed, .key.failed { fill: var(--failed); background: var(--failed); }
.chart text.peak { font-size: 10px; fill: var(--muted); }
.legend { font-size: 12px; color: var(--muted); }
.key { display: inline-block; width: .7rem; height: .7rem; margin: 0 .25rem 0 .6rem; vertical-align: middle; }
.filters { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: flex-end; padding: .6rem .8rem; margin-bottom: 1rem;
  background: var(--panel); border: 1px solid var(--line); border-radius: 3px; }
.filters fieldset { border: none; margin: 0; padding: 0; }
.filters legend { font-size: 12px; color: var(--muted); }
.filters label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); }
.filters label.check, label.check { flex-direction: row; display: inline-flex; gap: .2rem; align-items: center; color: var(--fg); margin-right: .4rem; }
input, select, button { font: inherit; font-size: 13px; }
input:not([type]), input[type=password] { padding: .2rem .35rem; border: 1px solid var(--line); border-radius: 3px; }
button { padding: .25rem .7rem; border: 1px solid #9aa5b4; border-radius: 3px; background: #fff; cursor: pointer; }
button:hover { background: #eef2f8; }
button.danger { border-color: var(--failed); color: var(--failed); }
.actions { display: flex; gap: .5rem; margin: .4rem 0 1rem; }
.child { font-size: 12px; color: var(--muted); white-space: nowrap; }
form.signal { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: flex-end; margin: .6rem 0 1rem; padding: .6rem .8rem;
  background: var(--panel); border: 1px solid var(--line); border-radius: 3px; }
form.signal label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); }
textarea { font: 12px ui-monospace, monospace; min-width: 20rem; padding: .2rem .35rem; border: 1px solid var(--line); border-radius: 3px; }
.bulk { margin-top: 1rem; padding: .6rem .8rem; background: var(--panel); border: 1px dashed var(--line); }
.pages { color: var(--muted); }
.none { color: var(--muted); font-style: italic; }
.notice { padding: .5rem .8rem; background: #e6f0fb; border: 1px solid #b8d1f0; border-radius: 3px; }
.notice.error { background: #fdecec; border-color: #f2b8b8; }
.error-text { color: var(--failed); white-space: pre-wrap; word-break: break-word; }
pre.json { margin: 0; padding: .5rem; background: #fafbfc; border: 1px solid var(--line); max-height: 24rem; overflow: auto;
  font-size: 12px; white-space: pre-wrap; word-break: break-word; }
tr.summary td { color: var(--muted); font-size: 12px; }
tr.gone td { color: var(--muted); }
.history { list-style: none; padding: 0; margin: 0; font-size: 13px; background: var(--panel); border: 1px solid var(--line); }
.history li { padding: .2rem .6rem; border-bottom: 1px solid var(--line); word-break: break-word; }
.history .event { font-weight: 600; } .history .failed .event { color: var(--failed); }
.history .completed .event { color: var(--completed); }
.history .time { color: var(--muted); font-size: 12px; }
.login label { display: flex; flex-direction: column; max-width: 24rem; margin-bottom: .6rem; }
.live-state { font-size: 12px; }
.depth-1 { padding-left: 1.5rem; } .depth-2 { padding-left: 2.5rem; } .depth-3 { padding-left: 3.5rem; }
.depth-4 { padding-left: 4.5rem; } .depth-5 { padding-left: 5.5rem; } .depth-6 { padding-left: 6.5rem; }
.depth-7 { padding-left: 7.5rem; } .depth-8 { padding-left: 8.5rem; } .depth-9 { padding-left: 9.5rem; }
.depth-10 { padding-left: 10.5rem; } .depth-11 { padding-left: 11.5rem; } .depth-12 { padding-left: 12.5rem; }
"""#
}
#endif
