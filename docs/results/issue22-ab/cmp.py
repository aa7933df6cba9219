import csv,statistics,sys,glob,collections
vs=sys.argv[1:] or ["before","after","links"]
d=collections.defaultdict(lambda: collections.defaultdict(list))
for v in vs:
    for f in sorted(glob.glob(f'/tmp/ab22c/{v}-[0-9]/results.csv')):
        run=collections.defaultdict(list)
        for r in csv.DictReader(open(f)):
            if r['mops']: run[(r['system'],r['workload'],r['threads'])].append(float(r['mops']))
        for k,x in run.items(): d[k][v].append(statistics.median(x))
print(f"| system | workload | threads | " + " | ".join(f"{v} (per run)" for v in vs) + " | " + " | ".join(f"{v} ÷ {vs[0]}" for v in vs[1:]) + " |")
print("|---|---|---:|" + "---:|"*(2*len(vs)-1))
for k in sorted(d, key=lambda k:(k[0],k[1],k[2])):
    if any(not d[k][v] for v in vs): continue
    cols=[", ".join('%.1f'%x for x in d[k][v]) for v in vs]
    rat=[ "%.2f"%(statistics.median(d[k][v])/statistics.median(d[k][vs[0]])) for v in vs[1:]]
    print(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(cols) + " | " + " | ".join(rat) + " |")
