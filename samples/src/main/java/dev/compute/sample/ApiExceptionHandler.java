package dev.compute.sample;

import dev.compute.memory.DeviceOutOfMemoryException;
import org.jspecify.annotations.Nullable;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.ProblemDetail;
import org.springframework.http.ResponseEntity;
import org.springframework.http.converter.HttpMessageNotReadableException;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.RestControllerAdvice;
import org.springframework.web.context.request.WebRequest;
import org.springframework.web.servlet.mvc.method.annotation.ResponseEntityExceptionHandler;

/** Errors of the REST API as RFC 9457 problem details, each with a message a caller can act on. */
@RestControllerAdvice(assignableTypes = {VectorController.class, LoadController.class})
public class ApiExceptionHandler extends ResponseEntityExceptionHandler {

    @ExceptionHandler(IllegalArgumentException.class)
    ProblemDetail badRequest(IllegalArgumentException e) {
        return ProblemDetail.forStatusAndDetail(HttpStatus.BAD_REQUEST, e.getMessage());
    }

    @ExceptionHandler(VectorStore.VectorNotFoundException.class)
    ProblemDetail notFound(VectorStore.VectorNotFoundException e) {
        return ProblemDetail.forStatusAndDetail(HttpStatus.NOT_FOUND, e.getMessage());
    }

    // The device is full even after the pool released its cache: the request may succeed later, or smaller.
    @ExceptionHandler(DeviceOutOfMemoryException.class)
    ProblemDetail outOfMemory(DeviceOutOfMemoryException e) {
        return ProblemDetail.forStatusAndDetail(HttpStatus.INSUFFICIENT_STORAGE, e.getMessage());
    }

    @Override
    protected @Nullable ResponseEntity<Object> handleHttpMessageNotReadable(HttpMessageNotReadableException e, HttpHeaders headers,
            HttpStatusCode status, WebRequest request) {
        ProblemDetail problem = ProblemDetail.forStatusAndDetail(HttpStatus.BAD_REQUEST,
                "the request body is not the JSON this operation takes (numbers in arrays, such as {\"alpha\": 2, \"x\": [1, 2, 3]}): "
                        + (e.getMostSpecificCause().getMessage() != null ? firstLine(e.getMostSpecificCause().getMessage()) : e.getMessage()));
        return handleExceptionInternal(e, problem, headers, HttpStatus.BAD_REQUEST, request);
    }

    private static String firstLine(String message) {
        int end = message.indexOf('\n');
        return end < 0 ? message : message.substring(0, end);
    }
}
