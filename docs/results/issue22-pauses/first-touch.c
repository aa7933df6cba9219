#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
int main(int argc,char**argv){
  size_t sz=256ul<<20; int huge=atoi(argv[1]);
  char*p=mmap(0,sz,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  if(huge) madvise(p,sz,MADV_HUGEPAGE); else madvise(p,sz,MADV_NOHUGEPAGE);
  double mx=0,tot=0; int n=0;
  for(size_t o=0;o<sz;o+=2<<20){double t=now(); for(size_t i=0;i<(2<<20);i+=4096) p[o+i]=1; double d=now()-t; tot+=d; if(d>mx)mx=d; n++;}
  printf("huge=%d first touch per 2MiB: avg %.3f ms max %.3f ms\n",huge,tot/n,mx);
  double t=now(); memset(p,0,sz); printf("memset faulted 256MiB: %.1f ms (%.3f ms per 2MiB)\n",now()-t,(now()-t)/128);
}
