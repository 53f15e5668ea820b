#!/usr/bin/env python3
"""Regenerate the figure cells of the README's "## Quality" eval tables from
bench/results/eval-<set>/results.json (and eval-own-<set>/ for the own-replies table).

  python3 bench/readme_rows.py --readme README.md --results bench/results --out README.md
  python3 bench/readme_rows.py --readme README.md --results bench/results --add dev31 --add conv31   # rows to paste

Only the figure cells are recomputed; each row's label cells stay as written. Rows marked
"(round 8)" and rows whose results directory is missing are left untouched (listed on stderr).
Standard library only: run it after `coffeebot eval … --out bench/results/eval-<set>` for every set.
"""
import argparse
import json
import os
import re
import sys

MAIN_HEAD = '| set | system | citation F1 [95% CI] | Hit@1 | Hit@5 | MRR | refused (unanswerable) | answerable refused |'
OWN_HEAD = '| set | follow-ups | Hit@1 own / written | Hit@5 own / written | MRR own / written | citation F1 own / written |'
KIND_WORDS = {'single': 'single', 'follow-ups': 'followup', 'switches': 'switch', 'switch': 'switch',
              'alone': 'switch_alone'}
BB = 'B1 no reranker / B5 no HAR/IHI'
B5 = 'B5 no HAR/IHI'
DASH = '—'


def f3(x):
    """A metric at three decimals (Python's correctly rounded format), or a dash when absent."""
    return DASH if x is None else '%.3f' % x


def sig2(x):
    """Two significant figures, no exponent: p values (0.0024, 0.067, 1) and percents (3.1, 12, 0)."""
    s = '%.2g' % x
    return format(float(s), 'f').rstrip('0').rstrip('.') if 'e' in s else s


def pct(x):
    return DASH if x is None else sig2(100 * x) + ' %'


def joined(values):
    return ' / '.join(values)


class Results:
    def __init__(self, root):
        self.root, self.cache = root, {}

    def get(self, name):
        """results.json of eval-<name>, or None when that directory does not exist."""
        if name not in self.cache:
            path = os.path.join(self.root, 'eval-' + name, 'results.json')
            self.cache[name] = json.load(open(path, encoding='utf-8')) if os.path.exists(path) else None
        return self.cache[name]


def refused_count(sysd):
    """'refused/n' over the unanswerable items, or a dash when the set has none."""
    u = sysd['by_kind'].get('unanswerable')
    if not u or not u['n'] or u['refused'] is None:
        return DASH
    return '%d/%d' % (round(u['refused'] * u['n']), u['n'])


def answerable_refused(sysd, style):
    """False refusals over the answerable items, as a count 'k/n' or a percent, as the row had it."""
    rate = sysd['false_refusal_rate']
    if rate is None:
        return DASH
    if style == 'count':
        n_ans = sysd['n'] - (sysd['by_kind'].get('unanswerable') or {}).get('n', 0)
        return '%d/%d' % (round(rate * n_ans), n_ans)
    return pct(rate)


def style_of(cell):
    return 'count' if re.fullmatch(r'\d+/\d+', cell.strip()) else 'pct'


def p_value(res, b):
    return next(c['p'] for c in res['comparisons'] if c['a'] == 'full' and c['b'] == b)


def full_cells(res, style):
    s = res['systems']['full']
    lo, hi = s['f1_ci']
    return ['%s [%s, %s]' % (f3(s['f1']), f3(lo), f3(hi)), f3(s['hit_at_1']), f3(s['hit_at_5']),
            f3(s['mrr']), refused_count(s), answerable_refused(s, style)]


def bb_cells(res):
    b1, b5 = res['systems']['b1'], res['systems']['b5']
    both = lambda key: joined([f3(b1[key]), f3(b5[key])])
    r1, r5 = refused_count(b1), refused_count(b5)
    return [joined(['%s (p %s)' % (f3(b['f1']), sig2(p_value(res, name))) for name, b in (('b1', b1), ('b5', b5))]),
            both('hit_at_1'), both('hit_at_5'), both('mrr'),
            r1 if r1 == r5 else joined([r1, r5]), joined([pct(b1['false_refusal_rate']), pct(b5['false_refusal_rate'])])]


def kind_cells(res, system, kinds):
    """One value per kind in each cell; answerable refused for every kind but 'alone'."""
    bk = res['systems'][system]['by_kind']
    col = lambda key: joined([f3(bk[k][key]) for k in kinds])
    return [col('f1'), col('hit_at_1'), col('hit_at_5'), col('mrr'), DASH,
            joined([pct(bk[k]['false_refusals']) for k in kinds if k != 'switch_alone'])]


def own_cells(own, written):
    o, w = own['systems']['full']['by_kind']['followup'], written['systems']['full']['by_kind']['followup']
    return [str(o['n'])] + [joined([f3(o[k]), f3(w[k])]) for k in ('hit_at_1', 'hit_at_5', 'mrr', 'f1')]


def kinds_in(text):
    """Kinds named by a label such as 'single (36) / follow-ups (14) / switches (14) / alone'."""
    words = [part.split()[0] if part.split() else '' for part in text.split(' / ')]
    return [KIND_WORDS[w] for w in words] if words and all(w in KIND_WORDS for w in words) else None


def main_row(cells, results):
    """New figure cells for a main-table row, or a reason string for leaving it alone."""
    label, system = cells[0], cells[1]
    if '(round 8)' in label or '(round 8)' in system:
        return 'round 8 row'
    name, _, rest = label.partition(' ')
    res = results.get(name)
    if res is None:
        return 'no results directory eval-%s' % name
    if system == BB:
        return bb_cells(res)
    if system == B5:
        return kind_cells(res, 'b5', kinds_in(rest))
    if system.startswith('full: '):
        return kind_cells(res, 'full', kinds_in(system[len('full: '):]))
    if system == 'full':
        kinds = kinds_in(rest)
        return kind_cells(res, 'full', kinds) if kinds else full_cells(res, style_of(cells[7]))
    return 'unknown system cell %r' % system


def own_row(cells, results):
    name = cells[0]
    own, written = results.get('own-' + name), results.get(name)
    if own is None or written is None:
        return 'no results directory eval-%s' % ('own-' + name if own is None else name)
    return own_cells(own, written)


def regenerate(lines, results):
    out, untouched, table = [], [], None
    for line in lines:
        text = line.rstrip('\n')
        if text in (MAIN_HEAD, OWN_HEAD):
            table = text
        elif not text.startswith('|'):
            table = None
        elif table and not text.startswith('| ---'):
            cells = text[2:-2].split(' | ')
            new = (main_row(cells, results) if table == MAIN_HEAD else own_row(cells, results))
            if isinstance(new, str):
                untouched.append('%s  [%s]' % (text, new))
            else:
                keep = 2 if table == MAIN_HEAD else 1
                line = '| ' + ' | '.join(cells[:keep] + new) + ' |\n'
        out.append(line)
    return out, untouched


def sibling_style(lines, name):
    """Answerable-refused style of the existing full rows of the same family (name without its number)."""
    family = re.sub(r'\d+$', '', name)
    for line in lines:
        cells = line.rstrip('\n')[2:-2].split(' | ')
        if (len(cells) == 8 and cells[1] == 'full' and cells[7] != DASH
                and re.sub(r'\d+$', '', cells[0].split(' ')[0]) == family):
            return style_of(cells[7])
    return 'pct'


def rows_to_add(name, lines, results):
    """Rows a human can paste for a set with results but no row yet, in its siblings' formats."""
    res, own, rows = results.get(name), results.get('own-' + name), []
    row = lambda cells: '| ' + ' | '.join(cells) + ' |'
    if res is None:
        return ['# no results directory eval-%s' % name]
    if any(line.startswith('| %s ' % name) for line in lines):
        rows.append('# note: the README already has rows for %s; these are every row such a set gets' % name)
    systems, bk = res['systems'], res['systems']['full']['by_kind']
    label_of = {'single': 'single', 'followup': 'follow-ups', 'switch': 'switches'}
    rows.append(row([name, 'full'] + full_cells(res, sibling_style(lines, name))))
    if 'b1' in systems and 'b5' in systems:
        rows.append(row([name, BB] + bb_cells(res)))
    if 'followup' in bk and 'switch' in bk:
        kinds = [k for k in ('single', 'followup', 'switch') if k in bk]
        label = joined(['%s (%d)' % (label_of[k], bk[k]['n']) for k in kinds] + ['alone'])
        rows.append(row([name + ' ' + label, 'full'] + kind_cells(res, 'full', kinds + ['switch_alone'])))
    if 'b5' in systems and 'followup' in bk:
        rows.append(row(['%s follow-ups (%d)' % (name, bk['followup']['n']), B5] + kind_cells(res, 'b5', ['followup'])))
    if own is not None:
        rows += ['', 'own-replies table:', row([name] + own_cells(own, res))]
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--readme', required=True)
    ap.add_argument('--results', required=True, help='bench/results (holding eval-<set>/results.json)')
    ap.add_argument('--out', help='where to write the regenerated README (default: stdout, unless --add)')
    ap.add_argument('--add', action='append', default=[], metavar='SET',
                    help='print the rows a set without one would get (repeatable); nothing is placed')
    args = ap.parse_args()
    lines = open(args.readme, encoding='utf-8').readlines()
    results = Results(args.results)
    for name in args.add:
        print('\n'.join(['## %s' % name] + rows_to_add(name, lines, results) + ['']))
    if args.add and not args.out:
        return
    out, untouched = regenerate(lines, results)
    if args.out:
        open(args.out, 'w', encoding='utf-8').writelines(out)
    else:
        sys.stdout.writelines(out)
    for u in untouched:
        print('untouched: ' + u, file=sys.stderr)


if __name__ == '__main__':
    main()
