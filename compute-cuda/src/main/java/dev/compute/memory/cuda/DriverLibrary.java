package dev.compute.memory.cuda;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.jspecify.annotations.Nullable;

/**
 * FFM downcalls into {@code libcuda.so.1}: what the provider probes before JCuda is touched (so a machine
 * without the driver gets a reason, not an {@code UnsatisfiedLinkError}), the cheap current-context check, and
 * the virtual-memory calls, whose JCuda 12.6.0 binding of {@code cuMemCreate} passes uninitialised struct bytes
 * (the driver answers {@code CUDA_ERROR_INVALID_VALUE}), and page-locked host allocations, whose JCuda binding
 * cannot return 2 GiB or more (see {@link #hostAlloc}). Signatures follow {@code cuda.h}; CUdeviceptr, size_t,
 * handles and {@code unsigned long long} are {@code JAVA_LONG}, pointers {@code ADDRESS}, enums and
 * {@code unsigned int} {@code JAVA_INT}, as in {@code shared/gpu/probes/FfmVmmProbe.java}, which ran on the H100.
 */
final class DriverLibrary {

    static final String LIBRARY = "libcuda.so.1";

    private static final Linker LINKER = Linker.nativeLinker();

    /** Loaded once per JVM; a failure is remembered as its reason. */
    private static final class Holder {
        static final Object LOADED = load();

        private static Object load() {
            SymbolLookup lookup;
            try {
                lookup = SymbolLookup.libraryLookup(LIBRARY, Arena.global());
            } catch (IllegalArgumentException e) {
                return LIBRARY + " not found (is the NVIDIA driver installed? " + e.getMessage() + ")";
            }
            try {
                return new DriverLibrary(lookup);
            } catch (RuntimeException | LinkageError e) {
                return LIBRARY + " loaded but could not be bound: " + e.getMessage();
            }
        }
    }

    /** The library, or {@code null} with {@link #unavailableReason()} saying why. */
    static @Nullable DriverLibrary loadedOrNull() {
        return Holder.LOADED instanceof DriverLibrary library ? library : null;
    }

    static String unavailableReason() {
        return Holder.LOADED instanceof String reason ? reason : "";
    }

    /** Binds a driver library at a path (the tests' stand-in for {@code libcuda.so.1}). */
    static DriverLibrary open(Path library, Arena arena) {
        return new DriverLibrary(SymbolLookup.libraryLookup(library, arena));
    }

    final MethodHandle cuInit;
    final MethodHandle cuDriverGetVersion;
    final MethodHandle cuDeviceGetCount;
    final MethodHandle cuDeviceGet;
    final MethodHandle cuDeviceGetName;
    final MethodHandle cuDeviceGetAttribute;
    final MethodHandle cuCtxGetCurrent;
    final MethodHandle cuDevicePrimaryCtxRetain;
    final MethodHandle cuDevicePrimaryCtxRelease;
    final MethodHandle cuMemGetAllocationGranularity;
    final MethodHandle cuMemAddressReserve;
    final MethodHandle cuMemAddressFree;
    final MethodHandle cuMemCreate;
    final MethodHandle cuMemRelease;
    final MethodHandle cuMemMap;
    final MethodHandle cuMemUnmap;
    final MethodHandle cuMemSetAccess;
    final MethodHandle cuMemHostAlloc;
    final MethodHandle cuMemFreeHost;

    private DriverLibrary(SymbolLookup lookup) {
        cuInit = bind(lookup, "cuInit", JAVA_INT);                                           // (unsigned int flags)
        cuDriverGetVersion = bind(lookup, "cuDriverGetVersion", ADDRESS);                    // (int* version)
        cuDeviceGetCount = bind(lookup, "cuDeviceGetCount", ADDRESS);                        // (int* count)
        cuDeviceGet = bind(lookup, "cuDeviceGet", ADDRESS, JAVA_INT);                        // (CUdevice* device, int ordinal)
        cuDeviceGetName = bind(lookup, "cuDeviceGetName", ADDRESS, JAVA_INT, JAVA_INT);      // (char* name, int len, CUdevice dev)
        cuDeviceGetAttribute = bind(lookup, "cuDeviceGetAttribute", ADDRESS, JAVA_INT, JAVA_INT); // (int* pi, CUdevice_attribute attrib, CUdevice dev)
        cuCtxGetCurrent = bind(lookup, "cuCtxGetCurrent", ADDRESS);                          // (CUcontext* pctx)
        cuDevicePrimaryCtxRetain = bind(lookup, "cuDevicePrimaryCtxRetain", ADDRESS, JAVA_INT); // (CUcontext* pctx, CUdevice dev)
        cuDevicePrimaryCtxRelease = bind(lookup, "cuDevicePrimaryCtxRelease_v2", JAVA_INT);   // (CUdevice dev)
        // (size_t* granularity, const CUmemAllocationProp* prop, CUmemAllocationGranularity_flags option)
        cuMemGetAllocationGranularity = bind(lookup, "cuMemGetAllocationGranularity", ADDRESS, ADDRESS, JAVA_INT);
        // (CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags)
        cuMemAddressReserve = bind(lookup, "cuMemAddressReserve", ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG);
        cuMemAddressFree = bind(lookup, "cuMemAddressFree", JAVA_LONG, JAVA_LONG);           // (CUdeviceptr ptr, size_t size)
        // (CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop, unsigned long long flags)
        cuMemCreate = bind(lookup, "cuMemCreate", ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG);
        cuMemRelease = bind(lookup, "cuMemRelease", JAVA_LONG);                              // (CUmemGenericAllocationHandle handle)
        // (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle, unsigned long long flags)
        cuMemMap = bind(lookup, "cuMemMap", JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG);
        cuMemUnmap = bind(lookup, "cuMemUnmap", JAVA_LONG, JAVA_LONG);                       // (CUdeviceptr ptr, size_t size)
        // (CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count)
        cuMemSetAccess = bind(lookup, "cuMemSetAccess", JAVA_LONG, JAVA_LONG, ADDRESS, JAVA_LONG);
        // (void** pp, size_t bytesize, unsigned int Flags) and (void* p): no _v2 variants in cuda.h
        cuMemHostAlloc = bind(lookup, "cuMemHostAlloc", ADDRESS, JAVA_LONG, JAVA_INT);
        cuMemFreeHost = bind(lookup, "cuMemFreeHost", ADDRESS);
    }

    private static MethodHandle bind(SymbolLookup lookup, String name, MemoryLayout... arguments) {
        MemorySegment symbol = lookup.find(name).orElseThrow(
                () -> new IllegalArgumentException(LIBRARY + " has no symbol " + name + " (a driver older than CUDA 10.2?)"));
        return LINKER.downcallHandle(symbol, FunctionDescriptor.of(JAVA_INT, arguments));
    }

    // ---- typed wrappers: each returns the CUresult, or the value it reads back on success ------------------------

    int init() {
        try {
            return (int) cuInit.invokeExact(0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** The driver's CUDA version as {@code 1000 * major + 10 * minor} (12040 for 12.4). */
    int driverVersion() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_INT);
            CudaResults.check((int) cuDriverGetVersion.invokeExact(out), "cuDriverGetVersion");
            return out.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int deviceCount() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_INT);
            CudaResults.check((int) cuDeviceGetCount.invokeExact(out), "cuDeviceGetCount");
            return out.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** The {@code CUdevice} for an ordinal (the id a {@code CUmemLocation} names). */
    int device(int ordinal) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_INT);
            CudaResults.check((int) cuDeviceGet.invokeExact(out, ordinal), "cuDeviceGet(" + ordinal + ")");
            return out.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    String deviceName(int device) {
        try (Arena arena = Arena.ofConfined()) {
            int length = 256;
            MemorySegment name = arena.allocate(length);
            CudaResults.check((int) cuDeviceGetName.invokeExact(name, length, device), "cuDeviceGetName");
            return name.getString(0, StandardCharsets.UTF_8);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR} and {@code _MINOR} of {@code cuda.h}. */
    private static final int COMPUTE_CAPABILITY_MAJOR = 75;
    private static final int COMPUTE_CAPABILITY_MINOR = 76;

    /** The device's compute capability as {@code 10 * major + minor} (75 for 7.5, 90 for 9.0). */
    int computeCapability(int device) {
        return 10 * attribute(COMPUTE_CAPABILITY_MAJOR, device, "COMPUTE_CAPABILITY_MAJOR")
                + attribute(COMPUTE_CAPABILITY_MINOR, device, "COMPUTE_CAPABILITY_MINOR");
    }

    /** {@code CU_DEVICE_ATTRIBUTE_COMPUTE_MODE} of {@code cuda.h}, and the modes in which a process may be refused the device. */
    private static final int COMPUTE_MODE = 20;
    static final int COMPUTE_MODE_PROHIBITED = 2;
    static final int COMPUTE_MODE_EXCLUSIVE_PROCESS = 3;

    /** The device's {@code CUcomputemode}: 0 default, 2 prohibited, 3 exclusive process. */
    int computeMode(int device) {
        return attribute(COMPUTE_MODE, device, "COMPUTE_MODE");
    }

    /**
     * Whether this process can have the device's primary context: retains it and releases it at once; the retain's
     * CUresult. In exclusive-process mode the driver refuses it ({@code CUDA_ERROR_DEVICE_UNAVAILABLE}) while another
     * process holds the device.
     */
    int tryPrimaryContext(int device) {
        try (Arena arena = Arena.ofConfined()) {
            int retained = (int) cuDevicePrimaryCtxRetain.invokeExact(arena.allocate(ADDRESS), device);
            if (retained == CudaResults.SUCCESS) {
                CudaResults.check((int) cuDevicePrimaryCtxRelease.invokeExact(device), "cuDevicePrimaryCtxRelease");
            }
            return retained;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    private int attribute(int attribute, int device, String name) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_INT);
            CudaResults.check((int) cuDeviceGetAttribute.invokeExact(out, attribute, device), "cuDeviceGetAttribute(" + name + ")");
            return out.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** The calling thread's current context handle (0 for none), read into {@code scratch} (8 bytes). */
    long currentContext(MemorySegment scratch) {
        try {
            CudaResults.check((int) cuCtxGetCurrent.invokeExact(scratch), "cuCtxGetCurrent");
            return scratch.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * Page-locked host memory ({@code cuMemHostAlloc}); the context must be current. Not through JCuda: its
     * binding wraps the memory in a direct {@code ByteBuffer} ({@code NewDirectByteBuffer}), which Java caps at
     * {@code Integer.MAX_VALUE} bytes, so from 2 GiB on the call throws {@code IllegalArgumentException} after the
     * driver has pinned the memory, and the memory leaks.
     */
    long hostAlloc(long bytes, int flags, String call) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ADDRESS);
            CudaResults.check((int) cuMemHostAlloc.invokeExact(out, bytes, flags), call);
            return out.get(ADDRESS, 0).address();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Frees memory of {@link #hostAlloc}; the CUresult. */
    int freeHost(long address) {
        try {
            return (int) cuMemFreeHost.invokeExact(MemorySegment.ofAddress(address));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            return r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new IllegalStateException(t);
    }
}
