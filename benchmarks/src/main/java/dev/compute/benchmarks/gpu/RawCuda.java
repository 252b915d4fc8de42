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
import static jcuda.driver.JCudaDriver.cuMemcpyDtoH;
import static jcuda.driver.JCudaDriver.cuMemcpyHtoD;
import static jcuda.driver.JCudaDriver.cuStreamCreate;
import static jcuda.driver.JCudaDriver.cuStreamDestroy;
import static jcuda.driver.JCudaDriver.cuStreamSynchronize;

import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.nio.charset.StandardCharsets;
import jcuda.CudaException;
import jcuda.Pointer;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUdeviceptr;
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

    @Override
    public void close() {
        makeCurrent();
        cuStreamDestroy(stream);
        cuDevicePrimaryCtxRelease(device);
    }
}
