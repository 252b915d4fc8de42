// A stand-in for libcuda.so.1 with the symbols DriverLibrary binds. FakeDriverTest compiles it (with the
// system's cc) and calls it through DriverLibrary and CudaVirtualMemory, so that the FFM signatures, the
// struct contents and the page bookkeeping are checked on machines without a GPU. Each function checks what
// it is passed the way the real driver would reject it, and counts; stub_counters reports the counts.
// cuMemCreate fails with CUDA_ERROR_OUT_OF_MEMORY once 10 pages are live, to exercise the rollback.
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
typedef unsigned long long u64;
static long created, released, mapped, unmapped, reserved, freed, accessCalls, errors, live;
#define G (2ull<<20)
static int checkProp(const unsigned char* p, int dev) {
  int t, lt, id; memcpy(&t,p,4); memcpy(&lt,p+8,4); memcpy(&id,p+12,4);
  if (t!=1||lt!=1||id!=dev) { errors++; return 1; }
  for (int i=0;i<32;i++) { if (i>=0&&i<4) continue; if (i>=8&&i<16) continue; if (p[i]) { errors++; return 1; } }
  return 0;
}
int cuInit(unsigned f){ return f==0?0:1; }
int cuDriverGetVersion(int* v){ *v=13000; return 0; }
int cuDeviceGetCount(int* c){ *c=1; return 0; }
int cuDeviceGet(int* d, int o){ if(o!=0) return 101; *d=0; return 0; }
int cuDeviceGetName(char* n, int len, int d){ snprintf(n,len,"Stub GPU %d",d); return 0; }
int cuCtxGetCurrent(void** c){ *c=(void*)0; return 0; }
int cuMemGetAllocationGranularity(size_t* g, const void* prop, int opt){ if(checkProp(prop,0)||opt!=0) return 1; *g=G; return 0; }
int cuMemAddressReserve(u64* p, size_t size, size_t align, u64 addr, u64 flags){ if(size%G||align||addr||flags){errors++;return 1;} reserved++; *p=0x700000000000ull+reserved*0x10000000000ull; return 0; }
int cuMemAddressFree(u64 p, size_t size){ if(size%G){errors++;return 1;} freed++; return 0; }
int cuMemCreate(u64* h, size_t size, const void* prop, u64 flags){ if(checkProp(prop,0)||size!=G||flags){return 1;} if(live>=10) return 2; created++; live++; *h=1000+created; return 0; }
int cuMemRelease(u64 h){ if(h<1000){errors++;return 1;} released++; live--; return 0; }
int cuMemMap(u64 p, size_t size, size_t off, u64 h, u64 flags){ if(size!=G||off||flags||h<1000||p%G){errors++;return 1;} mapped++; return 0; }
int cuMemUnmap(u64 p, size_t size){ if(size!=G||p%G){errors++;return 1;} unmapped++; return 0; }
int cuMemSetAccess(u64 p, size_t size, const int* desc, size_t count){ if(count!=1||desc[0]!=1||desc[1]!=0||desc[2]!=3||size%G){errors++;return 1;} accessCalls++; return 0; }
int cuMemHostAlloc(void** pp, size_t size, unsigned flags){ if(!pp||!size){errors++;return 1;} if(flags&~0xfu) return 1; /* the refusal a test asks for */ *pp=malloc(size); return *pp?0:2; }
int cuMemFreeHost(void* p){ if(!p){errors++;return 1;} free(p); return 0; }
void stub_counters(long* o){ o[0]=created;o[1]=released;o[2]=mapped;o[3]=unmapped;o[4]=reserved;o[5]=freed;o[6]=accessCalls;o[7]=errors;o[8]=live; }
