package dev.compute.benchmarks.gpu;

/** There is no CUDA device to measure: no driver, no device, or not the one asked for. The message says which. */
final class NoCudaDeviceException extends Exception {
    NoCudaDeviceException(String message, Throwable cause) {
        super(message, cause);
    }

    NoCudaDeviceException(String message) {
        super(message);
    }
}
