package dev.compute.memory.cuda;

import dev.compute.memory.spi.BackendOutOfMemoryException;
import java.util.Set;
import jcuda.driver.CUresult;

/**
 * Turns a {@code CUresult} into the exception the SPI expects: out of memory becomes
 * {@link BackendOutOfMemoryException} (the pool releases its cache and retries on it), a sticky error a
 * {@link CudaContextLostException}, anything else a {@link CudaException} naming the call and the result.
 * {@code CUresult.stringFor} is plain Java, so naming a result needs no native library.
 */
final class CudaResults {
    static final int SUCCESS = CUresult.CUDA_SUCCESS;
    static final int OUT_OF_MEMORY = CUresult.CUDA_ERROR_OUT_OF_MEMORY;
    static final int NOT_READY = CUresult.CUDA_ERROR_NOT_READY;

    private CudaResults() {}

    static void check(int result, String call) {
        if (result != SUCCESS) {
            throw failure(result, call);
        }
    }

    static RuntimeException failure(int result, String call) {
        String message = call + " failed: " + name(result);
        if (result == OUT_OF_MEMORY) {
            return new BackendOutOfMemoryException(message);
        }
        if (contextLost(result)) {
            return new CudaContextLostException(call, result, message + ": the device's context is lost (an error of earlier"
                    + " device work, such as a kernel's invalid memory access, which the driver answers to every call from now on)");
        }
        return new CudaException(call, result, message);
    }

    /**
     * The sticky errors: those after which, as {@code cuda.h} says of each, the context cannot be used any more and
     * every further call in the process answers the same error.
     */
    private static final Set<Integer> CONTEXT_LOST = Set.of(CUresult.CUDA_ERROR_ILLEGAL_ADDRESS, CUresult.CUDA_ERROR_LAUNCH_TIMEOUT,
            CUresult.CUDA_ERROR_ASSERT, CUresult.CUDA_ERROR_HARDWARE_STACK_ERROR, CUresult.CUDA_ERROR_ILLEGAL_INSTRUCTION,
            CUresult.CUDA_ERROR_MISALIGNED_ADDRESS, CUresult.CUDA_ERROR_INVALID_ADDRESS_SPACE, CUresult.CUDA_ERROR_INVALID_PC,
            CUresult.CUDA_ERROR_LAUNCH_FAILED, CUresult.CUDA_ERROR_EXTERNAL_DEVICE);

    /** Whether {@code result} is a sticky error: the context is lost. */
    static boolean contextLost(int result) {
        return CONTEXT_LOST.contains(result);
    }

    /** {@code CUDA_ERROR_INVALID_VALUE (1)}; codes JCuda does not know are shown as numbers. */
    static String name(int result) {
        String name = CUresult.stringFor(result);
        return name.startsWith("INVALID CUresult") ? "CUresult " + result : name + " (" + result + ")";
    }
}
