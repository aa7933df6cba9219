#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <stdatomic.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
static atomic_int stop; static char*warm; static size_t wsz=256ul<<20;
void*reader(void*a){ double mx=0; long n=0; unsigned long x=88172645463325252ul; volatile char s=0;
  while(!atomic_load(&stop)){ double t=now(); for(int i=0;i<64;i++){x^=x<<13;x^=x>>7;x^=x<<17; s+=warm[x%wsz];} double d=now()-t; if(d>mx)mx=d; n++;}
  printf("reader: max per 64 reads %.3f ms over %ld batches\n",mx,n); return 0;}
int main(int argc,char**argv){
  warm=mmap(0,wsz,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); madvise(warm,wsz,MADV_HUGEPAGE); memset(warm,1,wsz);
  pthread_t th; pthread_create(&th,0,reader,0);
  size_t sz=(size_t)atoi(argv[1])<<20; char*p=mmap(0,sz,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); madvise(p,sz,MADV_HUGEPAGE);
  double mx=0,t0=now(); for(size_t o=0;o<sz;o+=2<<20){double t=now(); p[o]=1; double d=now()-t; if(d>mx)mx=d;}
  printf("toucher: %zu MiB, %.1f ms, max per 2MiB %.3f ms\n",sz>>20,now()-t0,mx);
  atomic_store(&stop,1); pthread_join(th,0);
}
