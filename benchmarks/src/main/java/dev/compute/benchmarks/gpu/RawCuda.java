package dev.compute.benchmarks.gpu;

import static jcuda.driver.JCudaDriver.cuCtxSetCurrent;
import static jcuda.driver.JCudaDriver.cuCtxSynchronize;
import static jcuda.driver.JCudaDriver.cuDeviceGet;
import static jcuda.driver.JCudaDriver.cuDeviceGetCount;
import static jcuda.driver.JCudaDriver.cuDeviceGetName;
import static jcuda.driver.JCudaDriver.cuDevicePrimaryCtxRelease;
import static jcuda.driver.JCudaDriver.cuDevicePrimaryCtxRetain;
import static jcuda.driver.JCudaDriver.cuDriverGetVersion;
import static jcuda.driver.JCudaDriver.cuInit;
import static jcuda.driver.JCudaDriver.cuMemAlloc;
import static jcuda.driver.JCudaDriver.cuMemAllocAsync;
import static jcuda.driver.JCudaDriver.cuMemAllocHost;
import static jcuda.driver.JCudaDriver.cuMemFree;
import static jcuda.driver.JCudaDriver.cuMemFreeAsync;
import static jcuda.driver.JCudaDriver.cuMemFreeHost;
import static jcuda.driver.JCudaDriver.cuLaunchKernel;
import static jcuda.driver.JCudaDriver.cuMemHostGetDevicePointer;
import static jcuda.driver.JCudaDriver.cuEventCreate;
import static jcuda.driver.JCudaDriver.cuEventDestroy;
import static jcuda.driver.JCudaDriver.cuEventRecord;
import static jcuda.driver.JCudaDriver.cuEventSynchronize;
import static jcuda.driver.JCudaDriver.cuMemcpy;
import static jcuda.driver.JCudaDriver.cuMemcpyAsync;
import static jcuda.driver.JCudaDriver.cuMemcpyDtoH;
import static jcuda.driver.JCudaDriver.cuModuleGetFunction;
import static jcuda.driver.JCudaDriver.cuModuleLoadData;
import static jcuda.driver.JCudaDriver.cuModuleUnload;
import static jcuda.driver.JCudaDriver.cuMemcpyHtoD;
import static jcuda.driver.JCudaDriver.cuStreamCreate;
import static jcuda.driver.JCudaDriver.cuStreamDestroy;
import static jcuda.driver.JCudaDriver.cuStreamSynchronize;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import jcuda.CudaException;
import jcuda.Pointer;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.CUfunction;
import jcuda.driver.CUmodule;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;

/**
 * The baselines: plain JCuda driver calls on the device's primary context (the one the CUDA backend uses too),
 * with JCuda's exceptions on, so a failed call stops the benchmark with the driver's error name.
 * {@link #open(int)} is also the fail-fast check: it says plainly why there is no device to measure.
 */
final class RawCuda implements AutoCloseable {

    static final String DRIVER_LIBRARY = "libcuda.so.1";

    private final CUdevice device = new CUdevice();
    private final CUcontext context = new CUcontext();
    private final CUstream stream = new CUstream();
    final String deviceName;
    final String driverVersion;

    private RawCuda(int index) throws NoCudaDeviceException {
        requireDriverLibrary();
        try {
            JCudaDriver.setExceptionsEnabled(true);
            cuInit(0);
        } catch (LinkageError e) {
            String message = String.valueOf(e.getMessage());
            throw new NoCudaDeviceException("no CUDA device: JCuda's driver binding did not load ("
                    + message.lines().findFirst().orElse(message) + ")", e);
        } catch (CudaException e) {
            throw new NoCudaDeviceException("no CUDA device: cuInit failed with " + e.getMessage()
                    + " (a driver without a usable device, or CUDA_VISIBLE_DEVICES hides them all)", e);
        }
        int[] count = new int[1];
        cuDeviceGetCount(count);
        if (index >= count[0]) {
            throw new NoCudaDeviceException("no CUDA device " + index + ": the driver sees " + count[0] + " device(s)");
        }
        cuDeviceGet(device, index);
        byte[] name = new byte[256];
        cuDeviceGetName(name, name.length, device);
        int end = 0;
        while (end < name.length && name[end] != 0) {
            end++;
        }
        this.deviceName = new String(name, 0, end, StandardCharsets.US_ASCII);
        int[] version = new int[1];
        cuDriverGetVersion(version);
        this.driverVersion = version[0] / 1000 + "." + version[0] % 1000 / 10;
        cuDevicePrimaryCtxRetain(context, device);
        makeCurrent();
        cuStreamCreate(stream, CUstream_flags.CU_STREAM_NON_BLOCKING);
    }

    /** The driver library, looked up before JCuda tries, so that its absence gets one clear line instead of JCuda's traces. */
    private static void requireDriverLibrary() throws NoCudaDeviceException {
        try (Arena arena = Arena.ofConfined()) {
            SymbolLookup.libraryLookup(DRIVER_LIBRARY, arena);
        } catch (IllegalArgumentException e) {
            throw new NoCudaDeviceException("no CUDA device: the NVIDIA driver library " + DRIVER_LIBRARY
                    + " is not on this machine. This benchmark needs an NVIDIA GPU and its driver; run it on the GPU"
                    + " machine as docs/benchmarks.md shows", e);
        }
    }

    /** Opens device {@code index} or says why it cannot. */
    static RawCuda open(int index) throws NoCudaDeviceException {
        return new RawCuda(index);
    }

    /** The primary context, current on this thread; the CUDA backend makes it current on its own calls too. */
    void makeCurrent() {
        cuCtxSetCurrent(context);
    }

    /** Waits for all work on the context, every stream of the CUDA backend included. */
    void synchronize() {
        makeCurrent();
        cuCtxSynchronize();
    }

    /** {@code cuMemAlloc} then {@code cuMemFree}. */
    void allocFreePair(long bytes) {
        CUdeviceptr pointer = new CUdeviceptr();
        cuMemAlloc(pointer, bytes);
        cuMemFree(pointer);
    }

    /** {@code cuMemAllocAsync} then {@code cuMemFreeAsync} on one stream (the device's default memory pool). */
    void asyncAllocFreePair(long bytes) {
        CUdeviceptr pointer = new CUdeviceptr();
        cuMemAllocAsync(pointer, bytes, stream);
        cuMemFreeAsync(pointer, stream);
    }

    void synchronizeStream() {
        cuStreamSynchronize(stream);
    }

    CUdeviceptr deviceAlloc(long bytes) {
        CUdeviceptr pointer = new CUdeviceptr();
        cuMemAlloc(pointer, bytes);
        return pointer;
    }

    void deviceFree(CUdeviceptr pointer) {
        cuMemFree(pointer);
    }

    /** Page-locked host memory from {@code cuMemAllocHost}. */
    Pointer pinnedAlloc(long bytes) {
        Pointer pointer = new Pointer();
        cuMemAllocHost(pointer, bytes);
        return pointer;
    }

    void pinnedFree(Pointer pointer) {
        cuMemFreeHost(pointer);
    }

    void copyToDevice(CUdeviceptr target, Pointer source, long bytes) {
        cuMemcpyHtoD(target, source, bytes);
    }

    void copyToHost(Pointer target, CUdeviceptr source, long bytes) {
        cuMemcpyDtoH(target, source, bytes);
    }

    /** A copy between any two device-visible pointers (unified addressing: pinned host memory too). */
    void copy(CUdeviceptr target, CUdeviceptr source, long bytes) {
        cuMemcpy(target, source, bytes);
    }

    /**
     * The backend's way: {@code cuMemcpyAsync} on a non-blocking stream, then a wait on a blocking-sync event
     * ({@code blockingEvent}) or on the stream; to tell a wait's cost from the copy's.
     */
    void copyAsyncAndWait(CUdeviceptr target, CUdeviceptr source, long bytes, boolean blockingEvent) {
        cuMemcpyAsync(target, source, bytes, stream);
        if (!blockingEvent) {
            cuStreamSynchronize(stream);
            return;
        }
        CUevent event = new CUevent();
        cuEventCreate(event, CUevent_flags.CU_EVENT_BLOCKING_SYNC | CUevent_flags.CU_EVENT_DISABLE_TIMING);
        try {
            cuEventRecord(event, stream);
            cuEventSynchronize(event);
        } finally {
            cuEventDestroy(event);
        }
    }

    /** The device's pointer to page-locked memory from {@link #pinnedAlloc}. */
    CUdeviceptr devicePointerOf(Pointer pinned) {
        CUdeviceptr pointer = new CUdeviceptr();
        cuMemHostGetDevicePointer(pointer, pinned, 0);
        return pointer;
    }

    /** {@code cuMemAllocHost} then {@code cuMemFreeHost}. */
    void pinnedAllocFreePair(long bytes) {
        pinnedFree(pinnedAlloc(bytes));
    }

    /** This benchmark's own stream (non-blocking), for the raw baselines. */
    CUstream stream() {
        return stream;
    }

    /** A PTX module from the class path, loaded into the primary context, so the backend's streams can launch it too. */
    CUmodule loadModule(String resource) {
        byte[] ptx;
        try (InputStream in = RawCuda.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IllegalStateException(resource + " is not on the class path");
            }
            ptx = in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        byte[] terminated = Arrays.copyOf(ptx, ptx.length + 1);
        CUmodule module = new CUmodule();
        makeCurrent();
        cuModuleLoadData(module, terminated);
        return module;
    }

    CUfunction function(CUmodule module, String name) {
        CUfunction function = new CUfunction();
        cuModuleGetFunction(function, module, name);
        return function;
    }

    void unload(CUmodule module) {
        makeCurrent();
        cuModuleUnload(module);
    }

    /** One launch of {@code blocks} blocks of {@code threads} threads on {@code on}. */
    static void launch(CUfunction function, int blocks, int threads, CUstream on, Pointer parameters) {
        cuLaunchKernel(function, blocks, 1, 1, threads, 1, 1, 0, on, parameters, null);
    }

    @Override
    public void close() {
        makeCurrent();
        cuStreamDestroy(stream);
        cuDevicePrimaryCtxRelease(device);
    }
}
