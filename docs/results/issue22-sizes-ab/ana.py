import re, collections, statistics as st
def load(f):
    d={}
    for line in open(f):
        m=re.match(r'^(value|key)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(dlht\S*|papaya|dashmap|scc)\s+([\d.]+)',line)
        if m: d[(m[1],int(m[2]),int(m[3]),m[5],m[6])]=float(m[7])
    return d
runs={f'{b}-{r}':load(f'/tmp/sizes-ab/{b}-{r}.txt') for b in ['before','after'] for r in [1,2]}
keys=runs['before-1'].keys()
agg=collections.defaultdict(list)
rows=[]
for k in keys:
    pass
    rs=[runs[f'after-{r}'][k]/runs[f'before-{r}'][k] for r in [1,2] if k in runs[f'after-{r}'] and k in runs[f'before-{r}']]
    if rs: agg[(k[4],k[3])]+=rs; rows.append((k,rs))
print("system workload: median after/before over all sizes and both pairs (min-max), n")
for (s,w),v in sorted(agg.items()):
    v=sorted(v); print(f"{s:18s} {w:11s} {st.median(v):.2f} ({v[0]:.2f}-{v[-1]:.2f}) n={len(v)}")
