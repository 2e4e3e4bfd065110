/** The benchmark's table: each figure beside its target and its value before the shared progress reader. */
export class Report {
  private readonly rows: Array<{ measure: string; target: string; before: string; now: string; met?: boolean }> = [];

  constructor(private readonly quick: boolean) {}

  add(measure: string, target: string, before: string, now: string, met?: boolean): void {
    this.rows.push({ measure, target, before, now, met });
    console.log(`  ${measure}: ${now}`);
  }

  print(): void {
    const head = { measure: 'measure', target: 'target', before: 'before', now: 'now', met: undefined };
    const mark = (met?: boolean) => (met === undefined ? '' : met ? 'met' : 'MISSED');
    const rows = [head, ...this.rows];
    const w = {
      measure: Math.max(...rows.map((r) => r.measure.length)),
      target: Math.max(...rows.map((r) => r.target.length)),
      before: Math.max(...rows.map((r) => r.before.length)),
      now: Math.max(...rows.map((r) => r.now.length)),
    };
    console.log(`\nQemuRun benchmark${this.quick ? ' (--quick)' : ''}\n`);
    for (const r of rows) {
      const status = r === head ? '' : mark(r.met);
      console.log(`${r.measure.padEnd(w.measure)}  ${r.target.padEnd(w.target)}  ${r.before.padEnd(w.before)}  ${r.now.padEnd(w.now)}  ${status}`.trimEnd());
    }
    const missed = this.rows.filter((r) => r.met === false).length;
    console.log(missed ? `\n${missed} target(s) missed` : '\nevery target met');
  }
}
