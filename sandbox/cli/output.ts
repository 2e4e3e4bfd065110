/**
 * pvesh's output formats. `json` is JSON::XS canonical (sorted keys, one line);
 * `json-pretty` is JSON::XS pretty (3-space indent, `"key" : value`); `text` is a
 * simplified version of CLIFormatter's tables.
 */

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    return Object.fromEntries(
      Object.keys(v as object)
        .sort()
        .map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]),
    );
  }
  return v;
}

export function toJson(v: unknown): string {
  return JSON.stringify(sortKeys(v));
}

export function toJsonPretty(v: unknown, indent = ''): string {
  const inner = indent + '   ';
  if (Array.isArray(v)) {
    if (v.length === 0) return '[]';
    return `[\n${v.map((x) => inner + toJsonPretty(x, inner)).join(',\n')}\n${indent}]`;
  }
  if (v && typeof v === 'object') {
    const keys = Object.keys(v as object).sort();
    if (keys.length === 0) return '{}';
    return `{\n${keys.map((k) => `${inner}${JSON.stringify(k)} : ${toJsonPretty((v as Record<string, unknown>)[k], inner)}`).join(',\n')}\n${indent}}`;
  }
  return JSON.stringify(v);
}

function cell(v: unknown): string {
  if (v === undefined || v === null) return '';
  if (typeof v === 'object') return toJson(v);
  return String(v);
}

function table(header: string[], rows: string[][], border: boolean, showHeader: boolean): string {
  const widths = header.map((h, i) => Math.max(showHeader ? h.length : 0, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => (border ? `│ ${cells.map((c, i) => c.padEnd(widths[i])).join(' │ ')} │` : cells.map((c, i) => c.padEnd(widths[i])).join(' ').trimEnd());
  const rule = (l: string, m: string, r: string) => `${l}${widths.map((w) => '─'.repeat(w + 2)).join(m)}${r}`;
  const out: string[] = [];
  if (border) out.push(rule('┌', '┬', '┐'));
  if (showHeader) {
    out.push(line(header));
    if (border) out.push(rule('╞', '╪', '╡').replace(/─/g, '═'));
  }
  rows.forEach((r, i) => {
    out.push(line(r));
    if (border && i < rows.length - 1) out.push(rule('├', '┼', '┤'));
  });
  if (border) out.push(rule('└', '┴', '┘'));
  return out.join('\n');
}

export function toText(v: unknown, border: boolean, showHeader: boolean): string {
  if (Array.isArray(v)) {
    if (v.length === 0) return '';
    if (v.every((x) => x && typeof x === 'object' && !Array.isArray(x))) {
      const keys = [...new Set(v.flatMap((x) => Object.keys(x as object)))].sort();
      return table(keys, v.map((x) => keys.map((k) => cell((x as Record<string, unknown>)[k]))), border, showHeader);
    }
    return v.map(cell).join('\n');
  }
  if (v && typeof v === 'object') {
    const keys = Object.keys(v as object).sort();
    return table(['key', 'value'], keys.map((k) => [k, cell((v as Record<string, unknown>)[k])]), border, showHeader);
  }
  return cell(v);
}
