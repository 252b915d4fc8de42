package dev.compute.memory.cuda;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.HashMap;
import java.util.Map;
import jcuda.CudaException;
import jcuda.Pointer;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUevent;
import jcuda.driver.CUfunction;
import jcuda.driver.CUmodule;
import jcuda.driver.CUresult;
import jcuda.driver.CUstream;
import jcuda.driver.JCudaDriver;
import jcuda.driver.JITOptions;
import org.jspecify.annotations.NullUnmarked;

/**
 * Every JCuda driver call the backend makes, each answering its {@code CUresult} whether or not the application has
 * turned on JCuda's exceptions. {@code JCudaDriver.setExceptionsEnabled(true)}, the first line of most JCuda samples,
 * is one switch for the whole JVM: with it on, JCuda throws its {@link CudaException} in place of every result but
 * success, {@code CUDA_ERROR_NOT_READY} too, which a query answers for work still under way, and out of memory, on which
 * the pool releases its cache and retries. Here that exception becomes its code again, so the backend reads every
 * result alike with the switch on or off. The backend's classes import these, never JCudaDriver's own
 * ({@code DriverCallsTest} checks it). Null-unmarked: the arguments are JCuda's, which takes null where the driver does.
 */
@NullUnmarked
final class DriverCalls {
    private DriverCalls() {}

    /** CUresult's codes by name: what JCuda's exception says ({@code CUresult.stringFor}). */
    private static final Map<String, Integer> CODES = codes();

    private static final String UNKNOWN = "INVALID CUresult: ";

    static int cuInit(int flags) {
        try { return JCudaDriver.cuInit(flags); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuDeviceGet(CUdevice device, int ordinal) {
        try { return JCudaDriver.cuDeviceGet(device, ordinal); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuDeviceTotalMem(long[] bytes, CUdevice device) {
        try { return JCudaDriver.cuDeviceTotalMem(bytes, device); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuDeviceGetAttribute(int[] value, int attribute, CUdevice device) {
        try { return JCudaDriver.cuDeviceGetAttribute(value, attribute, device); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuDevicePrimaryCtxRetain(CUcontext context, CUdevice device) {
        try { return JCudaDriver.cuDevicePrimaryCtxRetain(context, device); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuDevicePrimaryCtxRelease(CUdevice device) {
        try { return JCudaDriver.cuDevicePrimaryCtxRelease(device); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuCtxSetCurrent(CUcontext context) {
        try { return JCudaDriver.cuCtxSetCurrent(context); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuMemGetInfo(long[] free, long[] total) {
        try { return JCudaDriver.cuMemGetInfo(free, total); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuMemAlloc(CUdeviceptr pointer, long bytes) {
        try { return JCudaDriver.cuMemAlloc(pointer, bytes); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuMemAllocManaged(CUdeviceptr pointer, long bytes, int flags) {
        try { return JCudaDriver.cuMemAllocManaged(pointer, bytes, flags); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuMemFree(CUdeviceptr pointer) {
        try { return JCudaDriver.cuMemFree(pointer); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuMemHostAlloc(Pointer pointer, long bytes, int flags) {
        try { return JCudaDriver.cuMemHostAlloc(pointer, bytes, flags); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuMemFreeHost(Pointer pointer) {
        try { return JCudaDriver.cuMemFreeHost(pointer); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuMemcpyAsync(CUdeviceptr to, CUdeviceptr from, long bytes, CUstream stream) {
        try { return JCudaDriver.cuMemcpyAsync(to, from, bytes, stream); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuMemcpyHtoDAsync(CUdeviceptr to, Pointer from, long bytes, CUstream stream) {
        try { return JCudaDriver.cuMemcpyHtoDAsync(to, from, bytes, stream); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuMemcpyDtoHAsync(Pointer to, CUdeviceptr from, long bytes, CUstream stream) {
        try { return JCudaDriver.cuMemcpyDtoHAsync(to, from, bytes, stream); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuStreamCreate(CUstream stream, int flags) {
        try { return JCudaDriver.cuStreamCreate(stream, flags); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuStreamDestroy(CUstream stream) {
        try { return JCudaDriver.cuStreamDestroy(stream); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuStreamQuery(CUstream stream) {
        try { return JCudaDriver.cuStreamQuery(stream); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuStreamWaitEvent(CUstream stream, CUevent event, int flags) {
        try { return JCudaDriver.cuStreamWaitEvent(stream, event, flags); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuEventCreate(CUevent event, int flags) {
        try { return JCudaDriver.cuEventCreate(event, flags); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuEventDestroy(CUevent event) {
        try { return JCudaDriver.cuEventDestroy(event); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuEventRecord(CUevent event, CUstream stream) {
        try { return JCudaDriver.cuEventRecord(event, stream); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuEventQuery(CUevent event) {
        try { return JCudaDriver.cuEventQuery(event); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuEventSynchronize(CUevent event) {
        try { return JCudaDriver.cuEventSynchronize(event); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuModuleLoadData(CUmodule module, byte[] image) {
        try { return JCudaDriver.cuModuleLoadData(module, image); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuModuleLoadDataJIT(CUmodule module, Pointer image, JITOptions options) {
        try { return JCudaDriver.cuModuleLoadDataJIT(module, image, options); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuModuleGetFunction(CUfunction function, CUmodule module, String name) {
        try { return JCudaDriver.cuModuleGetFunction(function, module, name); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuModuleUnload(CUmodule module) {
        try { return JCudaDriver.cuModuleUnload(module); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuFuncGetAttribute(int[] value, int attribute, CUfunction function) {
        try { return JCudaDriver.cuFuncGetAttribute(value, attribute, function); } catch (CudaException thrown) { return result(thrown); }
    }

    static int cuLaunchKernel(CUfunction function, int gridX, int gridY, int gridZ, int blockX, int blockY, int blockZ, int sharedBytes, CUstream stream, Pointer parameters, Pointer extra) {
        try { return JCudaDriver.cuLaunchKernel(function, gridX, gridY, gridZ, blockX, blockY, blockZ, sharedBytes, stream, parameters, extra); } catch (CudaException thrown) { return result(thrown); }
    }

    /** The code whose name {@code thrown} carries; a JCuda exception that names no result is thrown again. */
    static int result(CudaException thrown) {
        String message = String.valueOf(thrown.getMessage());
        Integer code = CODES.get(message);
        if (code != null) {
            return code;
        }
        if (message.startsWith(UNKNOWN)) {
            try {
                return Integer.parseInt(message.substring(UNKNOWN.length()).trim());
            } catch (NumberFormatException notACode) {
                thrown.addSuppressed(notACode);
            }
        }
        throw thrown;
    }

    private static Map<String, Integer> codes() {
        Map<String, Integer> codes = new HashMap<>();
        for (Field field : CUresult.class.getFields()) {
            if (field.getType() == int.class && Modifier.isStatic(field.getModifiers())) {
                try {
                    int code = field.getInt(null);
                    codes.putIfAbsent(CUresult.stringFor(code), code);
                } catch (IllegalAccessException publicField) {
                    throw new IllegalStateException(publicField);
                }
            }
        }
        return Map.copyOf(codes);
    }
}
