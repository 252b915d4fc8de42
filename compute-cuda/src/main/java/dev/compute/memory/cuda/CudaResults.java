package dev.compute.memory.cuda;

import dev.compute.memory.spi.BackendOutOfMemoryException;
import jcuda.driver.CUresult;

/**
 * Turns a {@code CUresult} into the exception the SPI expects: out of memory becomes
 * {@link BackendOutOfMemoryException} (the pool releases its cache and retries on it), anything else a
 * {@link CudaException} naming the call and the result. {@code CUresult.stringFor} is plain Java, so naming a
 * result needs no native library.
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
        return new CudaException(call, result, message);
    }

    /** {@code CUDA_ERROR_INVALID_VALUE (1)}; codes JCuda does not know are shown as numbers. */
    static String name(int result) {
        String name = CUresult.stringFor(result);
        return name.startsWith("INVALID CUresult") ? "CUresult " + result : name + " (" + result + ")";
    }
}
