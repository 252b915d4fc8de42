// A stand-in for libcuda.so.1 with the symbols DriverLibrary binds and the ones JCuda's driver binding calls for a
// backend's life (context, streams, events, modules, allocations, copies). FakeDriverTest compiles it (with the system's
// cc) and calls it through DriverLibrary and CudaVirtualMemory, so that the FFM signatures, the struct contents
// and the page bookkeeping are checked on machines without a GPU; CudaBackendOnFakeDriverTest compiles it as
// libcuda.so.1 and runs a whole CudaBackend on it, JCuda included, in a JVM of its own. Each function checks what
// it is passed the way the real driver would reject it, and counts; stub_counters and stub_backend_counters
// report the counts. cuMemCreate fails with CUDA_ERROR_OUT_OF_MEMORY once 10 pages are live, to exercise the
// rollback. Events complete at once unless stub_hold is on when they are recorded, or a kernel queued on their stream
// while it was on has not been released (then they wait for stub_release; a held kernel's or copy's stream is busy
// until then, and a copy queued meanwhile runs only at stub_release, as the device would once past what holds it), or their stream was made while stub_failing_streams was on (then they report
// CUDA_ERROR_ILLEGAL_ADDRESS, as after a faulting kernel). Host, managed and device memory is mmap'd, and the last
// release of the primary context unmaps what is still allocated, as the real driver's context reset does.
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <sys/mman.h>
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
static __thread void* current;
// stub_lose_context: from now on every call that allocates or does work in the context answers CUDA_ERROR_ILLEGAL_ADDRESS,
// as the driver does after a kernel's invalid access (a sticky error), until the context's reset (its last release);
// calls that give something back still succeed here
static int lostContext;
void stub_lose_context(void){ lostContext=1; }
// calls counted per function, in all and on the thread stub_count_on_this_thread marked (the caller of a chain), so a
// test can tell the calls a step costs the calling thread from the waiter's and callbacks' threads'
enum { CALL_LAUNCH, CALL_EVENT_RECORD, CALL_EVENT_SYNCHRONIZE, CALL_EVENT_QUERY, CALL_STREAM_WAIT_EVENT, CALL_STREAM_QUERY,
       CALL_EVENT_CREATE, CALL_CTX_GET_CURRENT, CALL_CTX_SET_CURRENT, CALL_KINDS };
static long callsInAll[CALL_KINDS], callsOnMarkedThread[CALL_KINDS];
static __thread int markedThread;
static void counted(int call){ __sync_fetch_and_add(&callsInAll[call],1); if(markedThread) __sync_fetch_and_add(&callsOnMarkedThread[call],1); }
void stub_count_on_this_thread(void){ markedThread=1; }
void stub_calls(long* o){ for(int i=0;i<CALL_KINDS;i++){ o[i]=callsInAll[i]; o[CALL_KINDS+i]=callsOnMarkedThread[i]; } }
int cuCtxGetCurrent(void** c){ counted(CALL_CTX_GET_CURRENT); *c=current; return 0; }
int cuMemGetAllocationGranularity(size_t* g, const void* prop, int opt){ if(checkProp(prop,0)||opt!=0) return 1; *g=G; return 0; }
int cuMemAddressReserve(u64* p, size_t size, size_t align, u64 addr, u64 flags){ if(lostContext) return 700; if(size%G||align||addr||flags){errors++;return 1;} reserved++; *p=0x700000000000ull+reserved*0x10000000000ull; return 0; }
int cuMemAddressFree(u64 p, size_t size){ if(size%G){errors++;return 1;} freed++; return 0; }
int cuMemCreate(u64* h, size_t size, const void* prop, u64 flags){ if(lostContext) return 700; if(checkProp(prop,0)||size!=G||flags){return 1;} if(live>=10) return 2; created++; live++; *h=1000+created; return 0; }
int cuMemRelease(u64 h){ if(h<1000){errors++;return 1;} released++; live--; return 0; }
// the addresses mapped now, so that a map over a mapped page or an unmap of an unmapped one is rejected as the driver
// does; stub_fail_unmap makes the next cuMemUnmap at an address fail (CUDA_ERROR_UNKNOWN), the page staying mapped, and
// stub_fail_map the next cuMemMap at an address, the page staying unmapped
static u64 mappedAt[1024], failUnmapAt, failMapAt;
static int mappedSlot(u64 p){ for(int i=0;i<1024;i++) if(mappedAt[i]==p) return i; return -1; }
int cuMemMap(u64 p, size_t size, size_t off, u64 h, u64 flags){ if(p&&p==failMapAt){failMapAt=0;return 999;} if(lostContext) return 700; if(size!=G||off||flags||h<1000||p%G||mappedSlot(p)>=0){errors++;return 1;} mappedAt[mappedSlot(0)]=p; mapped++; return 0; }
void stub_fail_map(u64 p){ failMapAt=p; }
// stub_block_frees makes each cuMemUnmap and cuMemFree_v2 wait in the driver, as on a hung device, until stub_unblock_frees;
// stub_blocked_frees says how many wait now
static pthread_mutex_t blockLock=PTHREAD_MUTEX_INITIALIZER; static pthread_cond_t unblocked=PTHREAD_COND_INITIALIZER; static int blockFrees, blockedFrees;
void stub_block_frees(void){ pthread_mutex_lock(&blockLock); blockFrees=1; pthread_mutex_unlock(&blockLock); }
void stub_unblock_frees(void){ pthread_mutex_lock(&blockLock); blockFrees=0; pthread_cond_broadcast(&unblocked); pthread_mutex_unlock(&blockLock); }
int stub_blocked_frees(void){ pthread_mutex_lock(&blockLock); int n=blockedFrees; pthread_mutex_unlock(&blockLock); return n; }
static void waitWhileFreesBlocked(void){ pthread_mutex_lock(&blockLock); if(blockFrees){ blockedFrees++; while(blockFrees) pthread_cond_wait(&unblocked,&blockLock); blockedFrees--; } pthread_mutex_unlock(&blockLock); }
int cuMemUnmap(u64 p, size_t size){ waitWhileFreesBlocked(); if(p&&p==failUnmapAt){failUnmapAt=0;return 999;} int slot=mappedSlot(p); if(size!=G||p%G||slot<0){errors++;return 1;} mappedAt[slot]=0; unmapped++; return 0; }
void stub_fail_unmap(u64 p){ failUnmapAt=p; }
// stub_fail_set_access makes the next cuMemSetAccess at an address fail (CUDA_ERROR_UNKNOWN), the pages staying mapped
static u64 failSetAccessAt;
void stub_fail_set_access(u64 p){ failSetAccessAt=p; }
int cuMemSetAccess(u64 p, size_t size, const int* desc, size_t count){ if(p&&p==failSetAccessAt){failSetAccessAt=0;return 999;} if(lostContext) return 700; if(count!=1||desc[0]!=1||desc[1]!=0||desc[2]!=3||size%G){errors++;return 1;} accessCalls++; return 0; }
void stub_counters(long* o){ o[0]=created;o[1]=released;o[2]=mapped;o[3]=unmapped;o[4]=reserved;o[5]=freed;o[6]=accessCalls;o[7]=errors;o[8]=live; }

// ---- what a CudaBackend's life calls through JCuda ----------------------------------------------------------------
#define CONTEXT ((void*)0xC0DE0000)
enum { HOST_MEMORY = 1, MANAGED_MEMORY = 2, DEVICE_MEMORY = 4 };
static struct { void* p; size_t n; int kind; } allocations[4096];
static long contextReferences, noContextCalls, streamsLive, eventsLive, eventsRecorded, resets;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t eventsDone = PTHREAD_COND_INITIALIZER;
static int holding, failingStreams;
static long holdGeneration = 1, releasedGeneration;
// until: busy (cuStreamQuery) until that release; kernelsUntil: what an event recorded on it waits for, the release of
// a kernel queued while held or of an event it was made to wait on (a held copy keeps the stream busy but, as the
// copies' scenarios want, holds up no event recorded once stub_hold is off)
typedef struct { int fails; long until; long kernelsUntil; } stream;
typedef struct { long until; int fails; } event;

static int needContext(void){ if(current!=CONTEXT){ __sync_fetch_and_add(&noContextCalls,1); return 1; } return 0; }
// what a call that needs the context answers: 201 without it current, the sticky error once it is lost, else 0
static int contextState(void){ return needContext() ? 201 : lostContext ? 700 : 0; }
static void* track(size_t n, int kind){
  void* p=mmap(0,n,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); if(p==MAP_FAILED) return 0;
  pthread_mutex_lock(&lock);
  for(int i=0;i<4096;i++) if(!allocations[i].p){ allocations[i].p=p; allocations[i].n=n; allocations[i].kind=kind; pthread_mutex_unlock(&lock); return p; }
  pthread_mutex_unlock(&lock); munmap(p,n); return 0;
}
static int untrack(void* p, int kinds){
  pthread_mutex_lock(&lock);
  for(int i=0;i<4096;i++) if(allocations[i].p==p && (allocations[i].kind&kinds)){ munmap(p,allocations[i].n); allocations[i].p=0; pthread_mutex_unlock(&lock); return 0; }
  pthread_mutex_unlock(&lock); errors++; return 400; /* CUDA_ERROR_INVALID_HANDLE */
}
static long liveAllocations(int kind){ long n=0; pthread_mutex_lock(&lock); for(int i=0;i<4096;i++) if(allocations[i].p&&allocations[i].kind==kind) n++; pthread_mutex_unlock(&lock); return n; }

// stub_fail_host_alloc: while on, cuMemHostAlloc answers CUDA_ERROR_OUT_OF_MEMORY, as when page-locked memory is short
static int failHostAllocs;
void stub_fail_host_alloc(int on){ failHostAllocs=on; }
int cuMemHostAlloc(void** pp, size_t size, unsigned flags){ if(!pp||!size){errors++;return 1;} if(flags&~0xfu) return 1; /* the refusal a test asks for */ if(lostContext) return 700; if(failHostAllocs) return 2; *pp=track(size,HOST_MEMORY); return *pp?0:2; }
// stub_fail_free makes the next cuMemFreeHost or cuMemFree of an address fail (CUDA_ERROR_UNKNOWN), the memory staying allocated
static u64 failFreeAt;
void stub_fail_free(u64 p){ failFreeAt=p; }
static int failsFree(u64 p){ if(p&&p==failFreeAt){failFreeAt=0;return 1;} return 0; }
int cuMemFreeHost(void* p){ if(!p){errors++;return 1;} if(failsFree((u64)p)) return 999; return untrack(p,HOST_MEMORY); }
int cuMemAllocManaged(u64* p, size_t size, unsigned flags){ int state=contextState(); if(state) return state; if(!size||flags!=1){errors++;return 1;} *p=(u64)track(size,MANAGED_MEMORY); return *p?0:2; }
int cuMemAlloc_v2(u64* p, size_t size){ int state=contextState(); if(state) return state; if(!size){errors++;return 1;} *p=(u64)track(size,DEVICE_MEMORY); return *p?0:2; }
int cuMemFree_v2(u64 p){ waitWhileFreesBlocked(); if(failsFree(p)) return 999; return untrack((void*)p,MANAGED_MEMORY|DEVICE_MEMORY); }
int cuMemGetInfo_v2(size_t* freeBytes, size_t* total){ int state=contextState(); if(state) return state; *freeBytes=70ull<<30; *total=80ull<<30; return 0; }

// stub_compute_mode: CU_DEVICE_ATTRIBUTE_COMPUTE_MODE (20) answers mode; no context is retained in prohibited mode (2),
// nor in exclusive-process mode (3) while another process holds the device: CUDA_ERROR_DEVICE_UNAVAILABLE
static int computeMode, heldByAnotherProcess;
void stub_compute_mode(int mode, int heldElsewhere){ computeMode=mode; heldByAnotherProcess=heldElsewhere; }
int cuDevicePrimaryCtxRetain(void** c, int d){ if(d!=0) return 101; if(computeMode==2||(computeMode==3&&heldByAnotherProcess)) return 46; __sync_fetch_and_add(&contextReferences,1); *c=CONTEXT; return 0; }
// stub_fail_release: while on, cuDevicePrimaryCtxRelease answers CUDA_ERROR_UNKNOWN, the reference kept
static int failRelease;
void stub_fail_release(int on){ failRelease=on; }
int cuDevicePrimaryCtxRelease_v2(int d){
  if(d!=0||contextReferences<=0){errors++;return 1;}
  if(failRelease) return 999;
  if(__sync_sub_and_fetch(&contextReferences,1)==0){ // the reset: everything allocated in the context goes
    resets++; lostContext=0;
    pthread_mutex_lock(&lock);
    for(int i=0;i<4096;i++) if(allocations[i].p){ munmap(allocations[i].p,allocations[i].n); allocations[i].p=0; }
    pthread_mutex_unlock(&lock);
  }
  return 0;
}
// stub_fail_set_current: while on, cuCtxSetCurrent of the context answers CUDA_ERROR_UNKNOWN
static int failSetCurrent;
void stub_fail_set_current(int on){ failSetCurrent=on; }
int cuCtxSetCurrent(void* c){ counted(CALL_CTX_SET_CURRENT); if(c&&c!=CONTEXT){errors++;return 201;} if(c&&failSetCurrent) return 999; current=c; return 0; }
int cuDeviceTotalMem_v2(size_t* bytes, int d){ if(d!=0) return 101; *bytes=80ull<<30; return 0; }
// compute capability 9.0 (75, 76) unless stub_compute_capability asked for another; managed memory (83) always, with
// concurrent managed access (89) unless stub_exclusive_managed_access asked for a device without it (before Pascal,
// Windows, WSL: the GPU holds managed memory alone while any kernel runs); virtual memory management (102) once stub_vmm
// asked for it, so a backend opened then uses expandable segments over the cuMem* calls above
static int vmm, exclusiveManagedAccess, ccMajor=9, ccMinor=0;
void stub_vmm(int on){ vmm=on; }
void stub_exclusive_managed_access(int on){ exclusiveManagedAccess=on; }
void stub_compute_capability(int major, int minor){ ccMajor=major; ccMinor=minor; }
int cuDeviceGetAttribute(int* v, int attribute, int d){
  if(d!=0) return 101;
  *v = attribute==20 ? computeMode : attribute==75 ? ccMajor : attribute==76 ? ccMinor : attribute==83 || (attribute==89 && !exclusiveManagedAccess) || (vmm && attribute==102);
  return 0;
}

int cuStreamCreate(void** s, unsigned flags){ int state=contextState(); if(state) return state; if(flags>1){errors++;return 1;} stream* st=calloc(1,sizeof(stream)); st->fails=failingStreams; *s=st; __sync_fetch_and_add(&streamsLive,1); return 0; }
int cuStreamDestroy_v2(void* s){ if(!s){errors++;return 400;} free(s); __sync_fetch_and_sub(&streamsLive,1); return 0; }
int cuEventCreate(void** e, unsigned flags){ counted(CALL_EVENT_CREATE); int state=contextState(); if(state) return state; if(flags&~3u){errors++;return 1;} *e=calloc(1,sizeof(event)); __sync_fetch_and_add(&eventsLive,1); return 0; }
int cuEventDestroy_v2(void* e){ if(!e){errors++;return 400;} free(e); __sync_fetch_and_sub(&eventsLive,1); return 0; }
// the stand-in runs work when it is queued; a stream made to wait on a held event is busy until its release, as the
// device's would be, so what is recorded on it later waits too
int cuStreamWaitEvent(void* s, void* e, unsigned flags){
  counted(CALL_STREAM_WAIT_EVENT);
  int state=contextState(); if(state) return state; if(!s||!e||flags){errors++;return 400;}
  stream* st=s; event* ev=e; pthread_mutex_lock(&lock); if(ev->until>st->until) st->until=ev->until; if(ev->until>st->kernelsUntil) st->kernelsUntil=ev->until; pthread_mutex_unlock(&lock);
  return 0;
}
int cuEventRecord(void* e, void* s){
  counted(CALL_EVENT_RECORD);
  int state=contextState(); if(state) return state;
  if(!e||!s){errors++;return 400;} // the backend never records on the legacy default stream
  // an event completes once the stream is past it: past a kernel held on the stream before it, too
  event* ev=e; stream* st=s; pthread_mutex_lock(&lock); ev->until=holding?holdGeneration:st->kernelsUntil; ev->fails=st->fails; if(ev->until>st->until) st->until=ev->until; eventsRecorded++; pthread_mutex_unlock(&lock);
  return 0;
}
int cuEventSynchronize(void* e){
  counted(CALL_EVENT_SYNCHRONIZE);
  if(!e){errors++;return 400;} if(lostContext) return 700;
  event* ev=e; pthread_mutex_lock(&lock); while(ev->until>releasedGeneration) pthread_cond_wait(&eventsDone,&lock); int fails=ev->fails; pthread_mutex_unlock(&lock);
  return fails?700:0; // CUDA_ERROR_ILLEGAL_ADDRESS
}
// a stream is busy while an event recorded on it waits for stub_release: the work before that event has not ended
int cuStreamQuery(void* s){ counted(CALL_STREAM_QUERY); int state=contextState(); if(state) return state; if(!s){errors++;return 400;} stream* st=s; pthread_mutex_lock(&lock); int r=st->until>releasedGeneration?600:st->fails?700:0; pthread_mutex_unlock(&lock); return r; }
int cuEventQuery(void* e){ counted(CALL_EVENT_QUERY); if(lostContext) return 700; event* ev=e; pthread_mutex_lock(&lock); int r=ev->until>releasedGeneration?600:ev->fails?700:0; pthread_mutex_unlock(&lock); return r; }

// copies: device and managed memory are host memory here, so a copy is a memcpy, done when it is queued, or, while
// stub_hold is on, at stub_release; one from or to pageable memory waits in the call for the stream's earlier work. A held copy whose memory of the driver's was freed meanwhile is counted, not run
// (the real device would have written or read freed memory)
typedef struct { void* to; const void* from; size_t n; void* toBase; void* fromBase; } heldCopy;
static heldCopy heldCopies[256];
static long heldCount, heldIntoFreed;
static void* allocationOf(const void* p){ for(int i=0;i<4096;i++) if(allocations[i].p && (char*)p>=(char*)allocations[i].p && (char*)p<(char*)allocations[i].p+allocations[i].n) return allocations[i].p; return 0; }
static int isAllocation(void* base){ for(int i=0;i<4096;i++) if(allocations[i].p==base) return 1; return 0; }
static int copy(void* to, const void* from, size_t n, void* s){
  int state=contextState(); if(state) return state; if(!to||!from||!s){errors++;return 1;}
  // the driver promises nothing for overlapping ranges (its copy engines move blocks in no promised order): refused here
  if((const char*)to<(const char*)from+n && (const char*)from<(const char*)to+n){errors++;return 1;}
  pthread_mutex_lock(&lock);
  // from or to pageable memory (none of the driver's allocations) the driver first waits for the stream's earlier work,
  // in the call ("a stream sync is performed before the copy is initiated"), and copies before it returns
  if(!allocationOf(from)||!allocationOf(to)){
    stream* st=s; while(st->until>releasedGeneration) pthread_cond_wait(&eventsDone,&lock);
    pthread_mutex_unlock(&lock); memcpy(to,from,n); return 0;
  }
  if(holding && heldCount<256){
    heldCopy c={to,from,n,allocationOf(to),allocationOf(from)}; heldCopies[heldCount++]=c;
    stream* st=s; if(holdGeneration>st->until) st->until=holdGeneration; // the stream is busy with it
    pthread_mutex_unlock(&lock); return 0;
  }
  pthread_mutex_unlock(&lock);
  memcpy(to,from,n); return 0;
}
static void runHeldCopies(void){ // under lock
  for(long i=0;i<heldCount;i++){
    heldCopy c=heldCopies[i];
    if((c.toBase&&!isAllocation(c.toBase))||(c.fromBase&&!isAllocation(c.fromBase))){ heldIntoFreed++; continue; }
    memcpy(c.to,c.from,c.n);
  }
  heldCount=0;
}
// copies held now, held copies that found memory of theirs freed when they ran
void stub_held_copies(long* o){ pthread_mutex_lock(&lock); o[0]=heldCount; o[1]=heldIntoFreed; pthread_mutex_unlock(&lock); }
int cuMemcpyAsync(u64 to, u64 from, size_t n, void* s){ return copy((void*)to,(const void*)from,n,s); }
int cuMemcpyHtoDAsync_v2(u64 to, const void* from, size_t n, void* s){ return copy((void*)to,from,n,s); }
int cuMemcpyDtoHAsync_v2(void* to, u64 from, size_t n, void* s){ return copy(to,(const void*)from,n,s); }

// ---- modules and launches: a module keeps its PTX, a function its name; cuLaunchKernel runs the kernels of
// compute-core's KernelContractTest (affine, scale_in_place, iota2d) on the host over the grid it is given, since
// this fake's device memory is host memory, and counts every launch with its grid, block and parameters.
#define MODULE_MAGIC 0x4D4F44554CL
#define FUNCTION_MAGIC 0x46554E43L
typedef struct { long magic; char* image; } module;
typedef struct { long magic; char name[128]; unsigned req[3]; } function; // req: the entry's .reqntid, zeros where none
static long modulesLive, launches;
static unsigned lastGrid[3], lastBlock[3];
static int entryIn(const char* image, const char* name){
  const char* p=image; size_t n=strlen(name);
  while((p=strstr(p,".entry"))){ p+=6; while(*p==' '||*p=='\t') p++; if(!strncmp(p,name,n)&&(p[n]=='('||p[n]==' '||p[n]=='\n'||p[n]=='\r'||p[n]=='\t')) return 1; }
  return 0;
}
static int loadModule(void** m, const void* image, unsigned n, const int* options, void** values){
  int state=contextState(); if(state) return state;
  if(!image||!strstr(image,".entry")||strstr(image,"bogus_instruction")){ // 218: CUDA_ERROR_INVALID_PTX, with the JIT's error log where asked for
    char* log=0; size_t size=0;
    for(unsigned i=0;i<n;i++){ if(options[i]==5) log=values[i]; if(options[i]==6) size=(size_t)values[i]; }
    if(log&&size) snprintf(log,size,"ptxas fatal   : fake driver: %s", image&&strstr(image,".entry") ? "unknown instruction 'bogus_instruction'" : "the PTX has no .entry");
    return 218;
  }
  module* mod=calloc(1,sizeof(module)); mod->magic=MODULE_MAGIC; mod->image=strdup(image); *m=mod; __sync_fetch_and_add(&modulesLive,1); return 0;
}
int cuModuleLoadData(void** m, const void* image){ return loadModule(m,image,0,0,0); }
int cuModuleLoadDataEx(void** m, const void* image, unsigned n, int* options, void** values){ return loadModule(m,image,n,options,values); }
// stub_fail_function_lookup(n): the n-th cuModuleGetFunction from now answers CUDA_ERROR_NOT_FOUND
static int failLookupIn;
void stub_fail_function_lookup(int n){ failLookupIn=n; }
int cuModuleGetFunction(void** f, void* m, const char* name){
  module* mod=m; if(!mod||mod->magic!=MODULE_MAGIC||!name||!*name){errors++;return 400;}
  if(failLookupIn>0 && --failLookupIn==0) return 500;
  if(!entryIn(mod->image,name)) return 500; // CUDA_ERROR_NOT_FOUND
  function* fn=calloc(1,sizeof(function)); fn->magic=FUNCTION_MAGIC; snprintf(fn->name,sizeof fn->name,"%s",name);
  // the entry's .reqntid, between its parameters and its body, as the driver reads it
  const char* entry=strstr(mod->image,".entry"); size_t n=strlen(name);
  while(entry){ const char* p=entry+6; while(*p==' '||*p=='\t') p++; if(!strncmp(p,name,n)&&(p[n]=='('||p[n]==' '||p[n]=='\n'||p[n]=='\r'||p[n]=='\t')) break; entry=strstr(p,".entry"); }
  if(entry){ const char* body=strchr(entry,'{'); const char* req=strstr(entry,".reqntid");
    if(req&&(!body||req<body)){ fn->req[0]=fn->req[1]=fn->req[2]=1; sscanf(req+8," %u , %u , %u",&fn->req[0],&fn->req[1],&fn->req[2]); } }
  *f=fn; return 0;
}
int cuModuleUnload(void* m){ module* mod=m; if(!mod||mod->magic!=MODULE_MAGIC){errors++;return 400;} mod->magic=0; free(mod->image); free(mod); __sync_fetch_and_sub(&modulesLive,1); return 0; }
int cuFuncGetAttribute(int* v, int attribute, void* f){ function* fn=f; if(!fn||fn->magic!=FUNCTION_MAGIC){errors++;return 400;} *v = attribute==0 ? (fn->req[0] ? (int)(fn->req[0]*fn->req[1]*fn->req[2]) : 1024) : 0; return 0; }
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared, void* s, void** params, void** extra){
  counted(CALL_LAUNCH);
  int state=contextState(); if(state) return state;
  function* fn=f; if(!fn||fn->magic!=FUNCTION_MAGIC||!s||!params||extra||shared||!gx||!gy||!gz||!bx||!by||!bz||(long)bx*by*bz>1024||bx>1024||by>1024||bz>64){errors++;return 1;}
  if(fn->req[0]&&(bx!=fn->req[0]||by!=fn->req[1]||bz!=fn->req[2])) return 1; // CUDA_ERROR_INVALID_VALUE: not the .reqntid block
  pthread_mutex_lock(&lock); if(holding){ stream* st=s; if(holdGeneration>st->until) st->until=holdGeneration; st->kernelsUntil=holdGeneration; } pthread_mutex_unlock(&lock); // a kernel queued while held
  __sync_fetch_and_add(&launches,1); lastGrid[0]=gx; lastGrid[1]=gy; lastGrid[2]=gz; lastBlock[0]=bx; lastBlock[1]=by; lastBlock[2]=bz;
  long long threadsX=(long long)gx*bx, threadsY=(long long)gy*by;
  if(!strcmp(fn->name,"affine")){
    float* x=*(float**)params[0]; float* y=*(float**)params[1]; long long n=*(long long*)params[2];
    float a=*(float*)params[3]; double b=*(double*)params[4]; int c=*(int*)params[5];
    for(long long i=0;i<n&&i<threadsX;i++) y[i]=x[i]*a+(float)b+(float)c;
  } else if(!strcmp(fn->name,"scale_in_place")){
    float* x=*(float**)params[0]; long long n=*(long long*)params[1]; float a=*(float*)params[2];
    for(long long i=0;i<n&&i<threadsX;i++) x[i]=x[i]*a;
  } else if(!strcmp(fn->name,"iota2d")){
    int* out=*(int**)params[0]; int w=*(int*)params[1]; int h=*(int*)params[2];
    for(long long y=0;y<h&&y<threadsY;y++) for(long long x=0;x<w&&x<threadsX;x++) out[y*w+x]=(int)(y*1000+x);
  }
  return 0;
}
// launches, live modules, the last launch's grid (3) and block (3)
void stub_kernel_counters(long* o){ o[0]=launches;o[1]=modulesLive;for(int i=0;i<3;i++){o[2+i]=lastGrid[i];o[5+i]=lastBlock[i];} }

void stub_hold(int on){ pthread_mutex_lock(&lock); holding=on; pthread_mutex_unlock(&lock); }
void stub_release(void){ pthread_mutex_lock(&lock); runHeldCopies(); releasedGeneration=holdGeneration++; holding=0; pthread_cond_broadcast(&eventsDone); pthread_mutex_unlock(&lock); }
void stub_failing_streams(int on){ failingStreams=on; }
// primary context references, context resets, live streams, live events, events recorded, live host (pinned),
// managed and device allocations, calls that needed a current context and had none, calls rejected
void stub_backend_counters(long* o){ o[0]=contextReferences;o[1]=resets;o[2]=streamsLive;o[3]=eventsLive;o[4]=eventsRecorded;
  o[5]=liveAllocations(HOST_MEMORY);o[6]=liveAllocations(MANAGED_MEMORY);o[7]=liveAllocations(DEVICE_MEMORY);o[8]=noContextCalls;o[9]=errors; }
