package dev.compute.memory.cuda;

/**
 * The device's context is lost: a driver call answered a sticky error ({@code CUDA_ERROR_ILLEGAL_ADDRESS},
 * {@code CUDA_ERROR_LAUNCH_FAILED} and the others {@code cuda.h} says leave the context unusable), left by earlier device
 * work such as a kernel's invalid memory access, which the driver then answers to every call in the context. Nothing
 * runs on it any more in this process: the backend refuses further work with this exception, without calling the
 * driver; close the manager, and restart the process to use the device again.
 */
public class CudaContextLostException extends CudaException {

    public CudaContextLostException(String call, int result, String message) {
        super(call, result, message);
    }

    /** A refusal after the loss, {@code lost} being the failure that found it. */
    CudaContextLostException(CudaContextLostException lost, String message) {
        super(lost.call(), lost.result(), message);
        initCause(lost);
    }
}
